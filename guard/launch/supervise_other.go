//go:build !linux

package launch

func supervise(*Spec) error { return launcherAvailable() }
