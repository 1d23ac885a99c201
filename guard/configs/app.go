package configs

import "fmt"

// buildApp adds L1 (policy) and L2 (validate). Filled in by the L1/L2 work.
func buildApp(o Options, s *Setup) error {
	return fmt.Errorf("%w: L1/L2 layers are not built yet", ErrUnavailable)
}

// buildAB adds the AgentBound-style manifest check.
func buildAB(o Options, s *Setup) error {
	return fmt.Errorf("%w: the AgentBound baseline is not built yet", ErrUnavailable)
}
