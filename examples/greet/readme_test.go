package greet_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's tutorial shows these files whole: each block marked
// <!-- file: examples/greet/PATH --> is the file as it is here.
func TestREADMEShowsTheseFiles(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)<!-- file: examples/greet/(\\S+) -->\n```go\n(.*?)\n```").FindAllStringSubmatch(string(readme), -1)
	require.GreaterOrEqual(t, len(blocks), 4, "the README shows the tutorial's files")
	for _, b := range blocks {
		file, err := os.ReadFile(b[1])
		require.NoError(t, err)
		require.Equal(t, strings.TrimRight(string(file), "\n"), b[2], "README's copy of examples/greet/%s", b[1])
	}
}
