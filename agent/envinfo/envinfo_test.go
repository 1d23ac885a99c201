package envinfo_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpguard/mcpguard/agent/envinfo"
	_ "github.com/mcpguard/mcpguard/internal/testenv"
)

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	rel := file("osrelease", "6.1.0-test\n")
	hostCPU := file("cpu-host", "processor : 0\nflags : fpu sev sev_es sev_snp\n")
	guestCPU := file("cpu-guest", "processor : 0\nflags : fpu hypervisor sev sev_es sev_snp\n")
	tdxCPU := file("cpu-tdx", "flags : fpu hypervisor tdx_guest\n")
	noDmesg := func() ([]byte, error) { return nil, errors.New("denied") }
	dmesg := func(s string) func() ([]byte, error) { return func() ([]byte, error) { return []byte(s), nil } }

	cases := []struct {
		name string
		p    envinfo.Paths
		want string
	}{
		{"plain host", envinfo.Paths{CPUInfo: hostCPU, Dmesg: noDmesg}, envinfo.None},
		{"snp device", envinfo.Paths{SEVGuest: rel, CPUInfo: hostCPU}, envinfo.SEVSNP},
		{"tdx device", envinfo.Paths{TDXGuest: rel}, envinfo.TDX},
		{"dmesg snp", envinfo.Paths{Dmesg: dmesg("[0.0] Memory Encryption Features active: AMD SEV SEV-ES SEV-SNP\n")}, envinfo.SEVSNP},
		{"dmesg tdx", envinfo.Paths{Dmesg: dmesg("Memory Encryption Features active: Intel TDX\n")}, envinfo.TDX},
		{"dmesg sev", envinfo.Paths{Dmesg: dmesg("Memory Encryption Features active: AMD SEV\n")}, envinfo.SEV},
		{"cpuinfo snp guest", envinfo.Paths{CPUInfo: guestCPU, Dmesg: noDmesg}, envinfo.SEVSNP},
		{"cpuinfo tdx guest", envinfo.Paths{CPUInfo: tdxCPU}, envinfo.TDX},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.OSRelease = rel
			f := envinfo.Detect(c.p)
			assert.Equal(t, c.want, f.CVM)
			assert.NotEmpty(t, f.Evidence)
			assert.Equal(t, "6.1.0-test", f.Kernel)
		})
	}
}

func TestDetectHere(t *testing.T) {
	f := envinfo.Detect(envinfo.DefaultPaths())
	assert.Contains(t, []string{envinfo.None, envinfo.SEV, envinfo.SEVSNP, envinfo.TDX}, f.CVM)
	assert.NotEmpty(t, f.Kernel)
	t.Logf("%+v", f)
}

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	f := envinfo.Facts{CVM: "none", Evidence: "x", Kernel: "6.1"}
	require.NoError(t, envinfo.Write(&b, envinfo.Lines("cvm", f, envinfo.Line{Key: "model-endpoint", Value: "http://a\nb"})))
	assert.Equal(t, "env: cvm\ncvm: none\ncvm-evidence: x\nkernel: 6.1\nmodel-endpoint: http://a b\n", b.String())
	assert.Error(t, envinfo.Write(&b, []envinfo.Line{{Key: "Bad Key", Value: "v"}}))
}
