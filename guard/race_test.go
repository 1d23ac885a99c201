//go:build race

package guard_test

// raceEnabled: the race detector slows JSON scanning about 20x, so the
// huge-message test moves a smaller message under it (CI also runs it
// without -race at full size).
const raceEnabled = true
