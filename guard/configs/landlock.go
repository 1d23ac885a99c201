package configs

// extraNames lists configs beyond the study's six (the Landlock backend).
func extraNames() []string { return nil }

// extraBuilder returns the builders for a config beyond the six.
func extraBuilder(name string) ([]builder, bool) { return nil, false }
