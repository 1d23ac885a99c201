//go:build !unix

package guard

// catchSIGPIPE: there is no SIGPIPE here; a write to a client that went
// away fails with an error, which ends the session.
func catchSIGPIPE() func() { return func() {} }
