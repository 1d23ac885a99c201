package gateway

import (
	"runtime"
	"sync/atomic"
)

// CountSessions counts the sessions g makes and, once the collector has
// freed them, the ones it freed; set it before g serves.
func CountSessions(g *Gateway, made, freed *atomic.Int64) {
	g.testSession = func(s *session) {
		made.Add(1)
		runtime.AddCleanup(s, func(freed *atomic.Int64) { freed.Add(1) }, freed)
	}
}
