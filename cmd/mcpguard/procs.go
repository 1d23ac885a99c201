package main

import (
	"os"
	"runtime"
)

// spareProc gives `mcpguard run` one P (Go's scheduler slot) more than the
// runtime would take. The proxy's client reader spends its life in a
// blocking read(2) of stdin (a pipe the client made blocking), and a
// goroutine in a syscall keeps its P. With only as many Ps as CPUs, every
// time the other reader works the runtime's monitor (sysmon) finds no idle
// P, takes the reader's P back and starts another thread for it, and stays
// in its 20 µs polling loop; in the standalone benchmark this was 30-60% of
// the proxy's CPU. With the spare P neither happens: measured here, C0's and
// C-app's CPU per call fell by about a fifth, and a byte relay's the same
// way (issue 20; README, Latency). An explicit GOMAXPROCS is left alone.
func spareProc() {
	runtime.GOMAXPROCS(spareProcs(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0)))
}

// spareProcs is the P count for spareProc: cur+1, or cur when the user set
// GOMAXPROCS.
func spareProcs(env string, cur int) int {
	if env != "" {
		return cur
	}
	return cur + 1
}
