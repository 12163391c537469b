package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/kawa-broker/kawa/internal/config"
	"github.com/kawa-broker/kawa/internal/log"
)

// crashPointEnv names the environment variable that makes `kawa serve` SIGKILL itself at a named crash point,
// for crash tests of a real process that need a chosen step rather than a timing: "swap:<step>" kills the
// process right after that step (log.SwapSteps) of the first segment swap of the log cleaner that reaches it.
const crashPointEnv = "KAWA_CRASH_POINT"

// setCrashPoint installs the crash point $KAWA_CRASH_POINT names, if any; an unknown one is an error.
func setCrashPoint(cfg *config.Broker, lg *slog.Logger) error {
	cp := os.Getenv(crashPointEnv)
	if cp == "" {
		return nil
	}
	step, ok := strings.CutPrefix(cp, "swap:")
	if !ok || !slices.Contains(log.SwapSteps, step) {
		return fmt.Errorf("%s=%q: want swap:<step>, a step of %v", crashPointEnv, cp, log.SwapSteps)
	}
	lg.Warn("crash point armed: the process kills itself there", "point", cp)
	cfg.OnSegmentSwap = func(s string) {
		if s == step {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way: take no further step
		}
	}
	return nil
}
