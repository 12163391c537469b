package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ExitStatus prints err the way its kind asks for and returns the exit status.
func ExitStatus(prog string, err error, stdout, stderr io.Writer) int {
	var help *HelpRequest
	var usage *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.Usage)
		return 0
	case errors.Is(err, flag.ErrHelp):
		// A FlagSet that printed its own usage (serve's, for one).
		return 0
	case errors.As(err, &usage):
		if usage.cmd != "" {
			prog += " " + usage.cmd
		}
		fmt.Fprintf(stderr, "%s: %v\n\n%s", prog, usage.err, usage.usage)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %s\n", prog, oneLine(err.Error()))
		return 1
	}
}

// oneLine folds a multi-line error (errors.Join) into one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
