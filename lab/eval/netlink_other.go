//go:build !linux

package eval

import "time"

// NetlinkSink is Linux's; elsewhere there is none.
type NetlinkSink struct{}

// NewNetlinkSink makes no sink off Linux.
func NewNetlinkSink(int) (*NetlinkSink, error) { return nil, nil }

// Received is empty.
func (s *NetlinkSink) Received() []byte { return nil }

// LastActivity is zero.
func (s *NetlinkSink) LastActivity() time.Time { return time.Time{} }

// Close does nothing.
func (s *NetlinkSink) Close() error { return nil }
