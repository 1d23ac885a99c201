package main

import (
	"context"
	"errors"
)

func cmdReport(ctx context.Context, s stdio, args []string) error {
	return errors.New("not built yet")
}
