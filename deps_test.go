package kawa_test

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kawa-broker/kawa"

// layers is layers.txt parsed: the allowed direct imports of each package of
// the module and the never rules (see the file's header for the format).
type layers struct {
	allowed map[string][]string
	never   []neverRule
}

type neverRule struct {
	line         int
	pkgs, except []string
	imports      []string
	why          string
}

// match reports whether path (module-relative for Kawa packages, full for
// third-party ones) matches pattern: exact, "x/..." for x and below, or "*"
// for every package of the module.
func match(pattern, path string, inModule bool) bool {
	switch {
	case pattern == "*":
		return inModule
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string, inModule bool) bool {
	for _, p := range patterns {
		if match(p, path, inModule) {
			return true
		}
	}
	return false
}

func readLayers(t *testing.T) layers {
	t.Helper()
	f, err := os.Open("layers.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := layers{allowed: map[string][]string{}}
	var entries []struct {
		line int
		text string
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if i := strings.Index(text, "#"); i >= 0 && !strings.HasPrefix(strings.TrimSpace(text), "never ") {
			text = text[:i]
		}
		switch {
		case strings.TrimSpace(text) == "":
		case text[0] == ' ' || text[0] == '\t':
			if len(entries) == 0 {
				t.Fatalf("layers.txt:%d: continuation line without an entry", n)
			}
			entries[len(entries)-1].text += " " + strings.TrimSpace(text)
		default:
			entries = append(entries, struct {
				line int
				text string
			}{n, text})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.text, "never "); ok {
			lhs, why, ok1 := strings.Cut(rest, " : ")
			from, to, ok2 := strings.Cut(lhs, " -> ")
			if !ok1 || !ok2 || strings.TrimSpace(why) == "" {
				t.Fatalf("layers.txt:%d: want \"never <packages> [except <packages>] -> <imports> : <why>\"", e.line)
			}
			r := neverRule{line: e.line, imports: strings.Fields(to), why: strings.TrimSpace(why)}
			pkgs, except, _ := strings.Cut(from, " except ")
			r.pkgs, r.except = strings.Fields(pkgs), strings.Fields(except)
			l.never = append(l.never, r)
			continue
		}
		pkg, imps, ok := strings.Cut(e.text, ":")
		pkg = strings.TrimSpace(pkg)
		if !ok || pkg == "" || strings.ContainsAny(pkg, " \t") {
			t.Fatalf("layers.txt:%d: want \"<package>: <imports>\"", e.line)
		}
		if _, dup := l.allowed[pkg]; dup {
			t.Fatalf("layers.txt:%d: %s listed twice", e.line, pkg)
		}
		l.allowed[pkg] = strings.Fields(imps)
	}
	return l
}

// rel names an import path as layers.txt does: module-relative inside the
// module, full outside it.
func rel(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r, true
	}
	return path, false
}

func stdlib(path string) bool { return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") }

// violation returns the never rule that forbids pkg to depend on dep, if any.
func (l layers) violation(pkg, dep string) (neverRule, bool) {
	d, depInModule := rel(dep)
	for _, r := range l.never {
		if matchAny(r.pkgs, pkg, true) && !matchAny(r.except, pkg, true) && matchAny(r.imports, d, depInModule) {
			return r, true
		}
	}
	return neverRule{}, false
}

// TestLayers checks every non-test package of the module against layers.txt:
// its direct imports against its allowed list, and all its dependencies
// against the never rules. It also checks that no allowed entry contradicts
// a never rule, so the file cannot disagree with itself.
func TestLayers(t *testing.T) {
	l := readLayers(t)
	for pkg, imps := range l.allowed {
		for _, imp := range imps {
			full := imp
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				full = module + "/" + strings.TrimSuffix(imp, "/...")
			} else if strings.Contains(imp, "...") {
				t.Errorf("layers.txt: %s allows %s: third-party imports are exact paths", pkg, imp)
			}
			if r, bad := l.violation(pkg, full); bad {
				t.Errorf("layers.txt: %s allows %s, which the never rule on line %d forbids: %s", pkg, imp, r.line, r.why)
			}
		}
	}

	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Split(line, "|")
		pkg, _ := rel(fields[0])
		if pkg == "." {
			continue
		}
		for _, dep := range strings.Fields(fields[2]) {
			if stdlib(dep) {
				continue
			}
			if r, bad := l.violation(pkg, dep); bad {
				t.Errorf("%s depends on %s (directly or through another package): never allowed (layers.txt:%d): %s", pkg, dep, r.line, r.why)
			}
		}
		rules, ok := l.allowed[pkg]
		if !ok {
			t.Errorf("package %s has no entry in layers.txt: add it with its allowed imports", pkg)
			continue
		}
		for _, imp := range strings.Fields(fields[1]) {
			if stdlib(imp) {
				continue
			}
			r, inModule := rel(imp)
			if !matchAny(rules, r, inModule) || (!inModule && !slices.Contains(rules, r)) {
				t.Errorf("%s imports %s, which layers.txt does not allow it", pkg, imp)
			}
		}
	}
}
