package launch

// HardLinks does not walk on Windows, which has no link count in
// os.FileInfo: complete is false, so callers treat the list as an
// unfinished walk (no backend that masks hard links runs here anyway:
// Prepare fails closed).
func HardLinks([]string) (files []string, complete bool) { return nil, false }
