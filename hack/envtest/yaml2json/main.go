// Command yaml2json reads YAML as kubectl does and prints the JSON kubectl would send.
//
// Each line of standard input is one YAML document, written as a JSON string. For each, one line
// is written to standard output: {"json": <the JSON>} with what sigs.k8s.io/yaml's YAMLToJSON
// (non-strict, over go.yaml.in/yaml/v2, as kubectl's manifest reader calls it) gives, or
// {"error": "<its error text>"}. The differential test of the project's YAML reader
// (tests/integration/test_yaml_kubectl.py) drives it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

type answer struct {
	JSON  json.RawMessage `json:"json,omitempty"`
	Error *string         `json:"error,omitempty"`
}

func convert(doc string) (out answer) {
	defer func() {
		if r := recover(); r != nil {
			text := fmt.Sprintf("panic: %v", r)
			out = answer{Error: &text}
		}
	}()
	converted, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		text := err.Error()
		return answer{Error: &text}
	}
	return answer{JSON: converted}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		var doc string
		if err := json.Unmarshal(in.Bytes(), &doc); err != nil {
			fmt.Fprintf(os.Stderr, "yaml2json: a line that is not a JSON string: %v\n", err)
			os.Exit(2)
		}
		if err := encoder.Encode(convert(doc)); err != nil {
			fmt.Fprintf(os.Stderr, "yaml2json: %v\n", err)
			os.Exit(1)
		}
		// One answer per line, written at once: the caller waits for it.
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "yaml2json: %v\n", err)
		os.Exit(1)
	}
}
