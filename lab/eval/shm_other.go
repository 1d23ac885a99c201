//go:build !linux

package eval

import "errors"

func holdShm([]byte) (int, error) { return -1, errors.New("System V shared memory: Linux only here") }

func removeShm(int) error { return nil }
