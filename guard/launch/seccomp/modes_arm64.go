//go:build linux

package seccomp

// modeArgs lists the calls that set a file mode and which argument holds
// it (arm64 has only the *at forms).
func modeArgs() []modeArg { return commonModeArgs() }
