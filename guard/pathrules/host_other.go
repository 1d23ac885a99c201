//go:build !windows && !darwin

package pathrules

// Host is the flavour of the system this binary runs on: Linux and the
// other Unix systems have POSIX rules (a case-insensitive mount there is
// the exception, and its case variants are refused by Within, not admitted).
const Host = POSIX
