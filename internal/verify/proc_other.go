//go:build !linux

package verify

import "os/exec"

// setDeathSignal has no portable equivalent outside Linux; children of an
// aborted run are reaped by the controller's deferred cleanup only.
func setDeathSignal(*exec.Cmd) {}
