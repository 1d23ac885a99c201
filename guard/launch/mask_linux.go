package launch

import "os"

// maskFile is what a masked file shows in the server's namespace: an
// empty, read-only file (the null device).
const maskFile = "/dev/null"

func maskPaths(paths []string) error {
	for _, p := range paths {
		if err := bindReadOnly(maskFile, p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}
