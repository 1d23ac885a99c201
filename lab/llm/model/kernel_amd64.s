#include "textflag.h"

// func tile2x4(x0, x1, w0, w1, w2, w3 *float32, k int, out *float32)
// out[r*4+c] = sum_i x_r[i]*w_c[i] for r < 2, c < 4; k > 0 and a multiple of 8.
TEXT ·tile2x4(SB), NOSPLIT, $0-64
	MOVQ x0+0(FP), AX
	MOVQ x1+8(FP), BX
	MOVQ w0+16(FP), CX
	MOVQ w1+24(FP), DX
	MOVQ w2+32(FP), SI
	MOVQ w3+40(FP), DI
	MOVQ k+48(FP), R8
	MOVQ out+56(FP), R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ R10, R10

loop:
	VMOVUPS (AX)(R10*1), Y8
	VMOVUPS (BX)(R10*1), Y9
	VMOVUPS (CX)(R10*1), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS (DX)(R10*1), Y11
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS (SI)(R10*1), Y12
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y9, Y6
	VMOVUPS (DI)(R10*1), Y13
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y13, Y9, Y7
	ADDQ $32, R10
	SUBQ $8, R8
	JNZ  loop

	// Row 0: four 8-wide sums to four scalars.
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (R9)
	// Row 1.
	VHADDPS Y5, Y4, Y4
	VHADDPS Y7, Y6, Y6
	VHADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VMOVUPS X4, 16(R9)
	VZEROUPPER
	RET

// func dot8(a, b *float32, n int) float32
// n > 0 and a multiple of 8.
TEXT ·dot8(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), AX
	MOVQ b+8(FP), BX
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	XORQ R10, R10

dloop:
	VMOVUPS (AX)(R10*1), Y1
	VFMADD231PS (BX)(R10*1), Y1, Y0
	ADDQ $32, R10
	SUBQ $8, CX
	JNZ  dloop

	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpy8(y *float32, a float32, x *float32, n int)
// y[i] += a*x[i]; n > 0 and a multiple of 8.
TEXT ·axpy8(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), AX
	VBROADCASTSS a+8(FP), Y0
	MOVQ x+16(FP), BX
	MOVQ n+24(FP), CX
	XORQ R10, R10

aloop:
	VMOVUPS (AX)(R10*1), Y1
	VFMADD231PS (BX)(R10*1), Y0, Y1
	VMOVUPS Y1, (AX)(R10*1)
	ADDQ $32, R10
	SUBQ $8, CX
	JNZ  aloop

	VZEROUPPER
	RET

#define BCAST(bits, reg) MOVL $bits, R11; VMOVD R11, X0; VPBROADCASTD X0, reg

// func expSub8(s *float32, n int, m float32) float32
// s[i] = e^(s[i]-m) for i < n (n > 0, a multiple of 8), returning the sum.
// Inputs below m-87 give e^-87 (~1.6e-38) instead of 0. e^x = 2^k·e^r with
// k = round(x·log2 e), r = x - k·ln2 (ln2 in two parts) in [-ln2/2, ln2/2],
// e^r by its Taylor series to degree 6 (relative error ~1.2e-7).
TEXT ·expSub8(SB), NOSPLIT, $0-28
	MOVQ s+0(FP), AX
	MOVQ n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	BCAST(0xc2ae0000, Y13) // -87
	BCAST(0x3fb8aa3b, Y12) // log2 e
	BCAST(0x3f317200, Y11) // ln2 high part
	BCAST(0x35bfbe8e, Y10) // ln2 low part
	BCAST(0x0000007f, Y9)  // 127, the exponent bias
	BCAST(0x3f800000, Y8)  // 1
	BCAST(0x3f000000, Y7)  // 1/2
	BCAST(0x3e2aaaab, Y6)  // 1/6
	BCAST(0x3d2aaaab, Y5)  // 1/24
	BCAST(0x3c088889, Y4)  // 1/120
	BCAST(0x3ab60b61, Y3)  // 1/720
	VXORPS Y14, Y14, Y14

eloop:
	VMOVUPS (AX), Y0
	VSUBPS Y15, Y0, Y0
	VMAXPS Y13, Y0, Y0
	VMULPS Y12, Y0, Y1
	VROUNDPS $0, Y1, Y1
	VFNMADD231PS Y11, Y1, Y0
	VFNMADD231PS Y10, Y1, Y0
	VMOVAPS Y3, Y2
	VFMADD213PS Y4, Y0, Y2
	VFMADD213PS Y5, Y0, Y2
	VFMADD213PS Y6, Y0, Y2
	VFMADD213PS Y7, Y0, Y2
	VFMADD213PS Y8, Y0, Y2
	VFMADD213PS Y8, Y0, Y2
	VCVTPS2DQ Y1, Y1
	VPADDD Y9, Y1, Y1
	VPSLLD $23, Y1, Y1
	VMULPS Y1, Y2, Y2
	VMOVUPS Y2, (AX)
	VADDPS Y2, Y14, Y14
	ADDQ $32, AX
	SUBQ $8, CX
	JNZ  eloop

	VEXTRACTF128 $1, Y14, X1
	VADDPS X1, X14, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
