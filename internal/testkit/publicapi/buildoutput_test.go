package publicapi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// No build output is tracked: an executable binary (ELF, Mach-O, PE) in
// git's index is something `go build` left and a commit picked up (an 18 MB
// sasrun once was). Scripts that are executable are fine.
func TestNoTrackedBinaries(t *testing.T) {
	r := root(t)
	out, err := exec.Command("git", "-C", r, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to check", err)
	}
	magics := [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {'M', 'Z'}}
	var binaries []string
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		f, err := os.Open(filepath.Join(r, name))
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := f.Read(head)
		f.Close()
		for _, m := range magics {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) {
				binaries = append(binaries, name)
				break
			}
		}
	}
	require.Empty(t, binaries, "executable binaries are tracked: remove them (git rm --cached) and ignore them")
}
