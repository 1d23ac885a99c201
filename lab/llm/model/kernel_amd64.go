package model

import "golang.org/x/sys/cpu"

// simd reports whether the AVX2+FMA kernels can run here.
var simd = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func tile2x4(x0, x1, w0, w1, w2, w3 *float32, k int, out *float32)

//go:noescape
func dot8(a, b *float32, n int) float32

//go:noescape
func axpy8(y *float32, a float32, x *float32, n int)

//go:noescape
func expSub8(s *float32, n int, m float32) float32
