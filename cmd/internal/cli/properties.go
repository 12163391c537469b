package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// Property is one key of a Java properties file, with the line its entry
// starts on (1-based), for error messages.
type Property struct {
	Key, Value string
	Line       int
}

// ParseProperties reads a Java properties file (java.util.Properties.load,
// the syntax of Kafka's server.properties and client configs): lines
// starting with # or ! are comments; an entry is "key=value", "key: value"
// or "key value" (the first unescaped '=', ':' or white space ends the key;
// white space around the separator is dropped); a line ending in an odd
// number of backslashes continues on the next one, whose leading white space
// is dropped; \t \n \r \f \uXXXX are escapes, and a backslash before any
// other character stands for that character. It returns the entries in file
// order, a later entry of a key replacing an earlier one (as Properties
// does). Errors name the line: a malformed \u escape, or a key that is empty.
func ParseProperties(b []byte) ([]Property, error) {
	// Line ends are \n, \r\n or a lone \r, as in Properties.load.
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n"), "\n")
	var out []Property
	index := map[string]int{}
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// Join continuation lines: an odd run of trailing backslashes.
		for continues(line) && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if continues(line) {
			line = line[:len(line)-1] // a continuation at end of file continues into nothing
		}
		rawKey, rawValue := splitEntry(line)
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		if key == "" {
			return nil, fmt.Errorf("line %d: entry without a key", start)
		}
		value, err := unescape(rawValue)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", start, key, err)
		}
		p := Property{Key: key, Value: value, Line: start}
		if j, ok := index[key]; ok {
			out[j] = p
			continue
		}
		index[key] = len(out)
		out = append(out, p)
	}
	return out, nil
}

// continues reports whether line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for n < len(line) && line[len(line)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// splitEntry splits a logical line (no leading white space) into its raw,
// still escaped, key and value.
func splitEntry(line string) (key, value string) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	key, rest := line[:i], line[i:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

// unescape resolves the escapes of a key or value.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \uXXXX escape`)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \uXXXX escape %q`, s[i-1:i+5])
			}
			b.WriteRune(rune(r))
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
