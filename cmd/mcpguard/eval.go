package main

import (
	"context"
	"errors"
)

func cmdEval(ctx context.Context, s stdio, args []string) error {
	return errors.New("not built yet")
}
