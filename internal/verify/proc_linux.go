package verify

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the child die with the controller, so an aborted run
// never leaves a broker or worker behind.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
