package landlock

import (
	"fmt"

	"github.com/mcpguard/mcpguard/guard"
	"github.com/mcpguard/mcpguard/guard/landlock/ruleset"
)

// The compiled rules and the wrapper live in package ruleset, which keeps
// the wrapper's start-up light; these names let callers stay in this one.
type (
	Rules    = ruleset.Rules
	PathRule = ruleset.PathRule
	Access   = ruleset.Access
	Probe    = ruleset.Probe
)

// Accesses and wrapper constants, see package ruleset.
const (
	Read            = ruleset.Read
	Write           = ruleset.Write
	Exec            = ruleset.Exec
	Device          = ruleset.Device
	ExecArg         = ruleset.ExecArg
	WrapperExitCode = ruleset.WrapperExitCode
	MaxABI          = ruleset.MaxABI
)

// ErrBadRules is ruleset.ErrBadRules.
var ErrBadRules = ruleset.ErrBadRules

// KernelABI is the real probe (ruleset.KernelABI).
func KernelABI() (int, error) { return ruleset.KernelABI() }

// Decode parses the wrapper's rules argument (ruleset.Decode).
func Decode(s string) (*Rules, error) { return ruleset.Decode(s) }

// Wrap is the wrapper (ruleset.Wrap).
func Wrap(args []string, probe Probe) error { return ruleset.Wrap(args, probe) }

// RestrictThread puts the calling, locked OS thread under r
// (ruleset.RestrictThread).
func RestrictThread(r *Rules, probe Probe) error { return ruleset.RestrictThread(r, probe) }

// checkABI is ruleset.CheckABI, failing with guard.ErrKernelRefused too, so
// that configs fail closed and tests skip with the kernel's reason.
func checkABI(probe Probe) (int, error) {
	abi, err := ruleset.CheckABI(probe)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", guard.ErrKernelRefused, err)
	}
	return abi, nil
}
