//go:build !amd64

package model

const simd = false

func tile2x4(x0, x1, w0, w1, w2, w3 *float32, k int, out *float32) { panic("no simd kernel") }
func dot8(a, b *float32, n int) float32                            { panic("no simd kernel") }
func axpy8(y *float32, a float32, x *float32, n int)               { panic("no simd kernel") }

func expSub8(s *float32, n int, m float32) float32 { panic("no simd kernel") }
