//go:build !linux

package tools

import "errors"

func sysvCount(int) (uint64, error) { return 0, errors.New("System V shared memory: Linux only here") }
