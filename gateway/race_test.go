//go:build race

package gateway_test

// raceEnabled: the race detector keeps the shadow memory of everything the
// process ever touched, so resident memory after a load says nothing about
// what the gateway kept (TestLoad100Sessions then holds its live heap to
// the baseline, and only logs RSS).
const raceEnabled = true
