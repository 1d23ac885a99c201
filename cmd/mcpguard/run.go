package main

import (
	"context"
	"errors"
)

func cmdRun(ctx context.Context, s stdio, args []string) error {
	return errors.New("not built yet")
}

func cmdCall(ctx context.Context, s stdio, args []string) error {
	return errors.New("not built yet")
}
