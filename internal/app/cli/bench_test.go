package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	if got := progressLine(2*time.Second, 250<<20, false); got != "    2.0s     250.0 MiB    1.05 Gbit/s\n" {
		t.Errorf("log line %q", got)
	}
	if got := progressLine(2*time.Second, 250<<20, true); got != "\r    2.0s     250.0 MiB    1.05 Gbit/s " {
		t.Errorf("terminal line %q", got)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) || isTerminal(&bytes.Buffer{}) {
		t.Error("a file or a buffer taken for a terminal")
	}
}

// `fips-go bench --json` into a pipe or file: one JSON object on stdout,
// and progress on stderr as lines with no carriage returns.
func TestBenchJSONAndLogProgress(t *testing.T) {
	var out, log bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &log
	if err := app.Run(context.Background(), []string{"fips-go", "bench", "-t", "2s", "--json"}); err != nil {
		t.Fatal(err)
	}
	var res benchJSON
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if dec.More() {
		t.Fatalf("more than one JSON value on stdout:\n%s", out.String())
	}
	if res.Bytes == 0 || res.ThroughputGbps <= 0 || res.ElapsedSeconds < 1.5 || res.Streams != 1 || res.Direction != "forward" || res.PeakRSSBytes <= 0 {
		t.Errorf("implausible result %+v", res)
	}
	if strings.Contains(log.String(), "\r") {
		t.Errorf("carriage returns in a log:\n%q", log.String())
	}
	// How often bench.TCP reports is its own business; here what matters
	// is that each report is a line.
	if !strings.Contains(log.String(), "Gbit/s\n") {
		t.Errorf("no progress line in the log:\n%s", log.String())
	}
}
