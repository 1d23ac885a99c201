//go:build !linux

package validate

// kernelResolve has no kernel to ask off Linux: resolve walks the path.
func kernelResolve(string) (string, bool) { return "", false }
