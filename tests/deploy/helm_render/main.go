// helm-render renders a Helm chart the way `helm template` does, for machines where no helm
// binary can be installed (Debian packages none). The rendering itself is done by the same
// libraries helm uses, from Debian's archive: Go's text/template engine, the Sprig function
// library (golang-github-masterminds-sprig-dev), sigs.k8s.io/yaml for toYaml/fromYaml
// (golang-k8s-sigs-yaml-dev) and gojsonschema for values.schema.json
// (golang-github-xeipuuv-gojsonschema-dev). This file only supplies what helm adds around them:
// the chart's files, values coalescing (-f files over values.yaml, null deletes a key), the
// values schema check, the built-in objects (.Values, .Release, .Chart, .Capabilities,
// .Template) and helm's own functions (include, tpl, required, toYaml, fromYaml, toJson,
// fromJson, lookup).
//
//	helm-render [-f values.yaml]... [--name hami] [--namespace kube-system] <chart-dir>
//	helm-render --to-json < manifests.yaml      (multi-document YAML to one JSON array)
//
// Prints the rendered manifests, each document preceded by "# Source: <chart>/templates/<file>";
// exit status 1 with helm's style of message when the values fail the schema or a template fails.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig" // v3 (Debian installs it without the /v3 suffix)
	"github.com/xeipuuv/gojsonschema"
	"sigs.k8s.io/yaml"
)

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

// coalesce merges src over dst as helm does for -f files: maps merge key by key, anything else
// in src replaces dst's value, and a null in src removes the key.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	if dst == nil {
		dst = map[string]interface{}{}
	}
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		sm, sIsMap := sv.(map[string]interface{})
		dm, dIsMap := dst[k].(map[string]interface{})
		if sIsMap && dIsMap {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = sv
		}
	}
	return dst
}

func readYAML(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func main() {
	var files valueFiles
	flag.Var(&files, "f", "values file (repeatable; later files win)")
	name := flag.String("name", "hami", "release name")
	namespace := flag.String("namespace", "kube-system", "release namespace")
	kubeVersion := flag.String("kube-version", "v1.32.0", "Capabilities.KubeVersion")
	toJSONMode := flag.Bool("to-json", false, "instead: read multi-document YAML on stdin, print a JSON array")
	flag.Parse()
	if *toJSONMode {
		if err := yamlStreamToJSON(); err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-render [-f values.yaml]... [--name N] [--namespace NS] <chart-dir>")
		os.Exit(2)
	}
	if err := render(flag.Arg(0), files, *name, *namespace, *kubeVersion); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// yamlStreamToJSON converts `kubectl kustomize` or helm output into one JSON array, so that the
// tests compare objects, not text (documents that are empty or only comments are skipped).
func yamlStreamToJSON() error {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	docs := []interface{}{}
	for _, doc := range strings.Split("\n"+string(data), "\n---") {
		var obj interface{}
		// The split took the line break that ended the document's last line (a block scalar's
		// final newline); give it back.
		if err := yaml.Unmarshal([]byte(doc+"\n"), &obj); err != nil {
			return err
		}
		if obj != nil {
			docs = append(docs, obj)
		}
	}
	out, err := json.Marshal(docs)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func render(dir string, files []string, release, namespace, kubeVersion string) error {
	chartMeta, err := readYAML(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return err
	}
	chartName, _ := chartMeta["name"].(string)
	values, err := readYAML(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		user, err := readYAML(f)
		if err != nil {
			return err
		}
		values = coalesce(values, user)
	}
	if schema, err := os.ReadFile(filepath.Join(dir, "values.schema.json")); err == nil {
		doc, _ := json.Marshal(values)
		result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(doc))
		if err != nil {
			return fmt.Errorf("values.schema.json: %v", err)
		}
		if !result.Valid() {
			var msgs []string
			for _, e := range result.Errors() {
				msgs = append(msgs, "- "+e.String())
			}
			sort.Strings(msgs)
			return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s",
				chartName, strings.Join(msgs, "\n"))
		}
	}

	root := template.New("gotpl").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return v, fmt.Errorf("%s", msg)
		}
		return v, nil
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil // helm template never reaches a cluster either
	}
	funcs["include"] = func(string, interface{}) (string, error) { return "", nil }
	funcs["tpl"] = func(string, interface{}) (string, error) { return "", nil }
	root.Funcs(funcs)
	// include and tpl need the template set itself.
	root.Funcs(template.FuncMap{
		"include": func(name string, data interface{}) (string, error) {
			var buf bytes.Buffer
			if err := root.ExecuteTemplate(&buf, name, data); err != nil {
				return "", err
			}
			return buf.String(), nil
		},
		"tpl": func(text string, data interface{}) (string, error) {
			t, err := root.Clone()
			if err != nil {
				return "", err
			}
			t, err = t.New("tpl").Parse(text)
			if err != nil {
				return "", err
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, data); err != nil {
				return "", err
			}
			return buf.String(), nil
		},
	})

	var names []string
	tdir := filepath.Join(dir, "templates")
	err = filepath.WalkDir(tdir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		name := chartName + "/" + filepath.ToSlash(rel)
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if _, err := root.New(name).Parse(string(text)); err != nil {
			return err
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)

	top := map[string]interface{}{
		"Values": values,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart": map[string]interface{}{
			"Name": chartName, "Version": chartMeta["version"], "AppVersion": chartMeta["appVersion"],
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{
				"Version": kubeVersion, "GitVersion": kubeVersion,
				"Major": strings.Split(strings.TrimPrefix(kubeVersion, "v"), ".")[0],
				"Minor": strings.Split(kubeVersion, ".")[1],
			},
		},
	}
	var out strings.Builder
	for _, name := range names {
		base := filepath.Base(name)
		if strings.HasPrefix(base, "_") || !(strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml")) {
			continue
		}
		top["Template"] = map[string]interface{}{"Name": name, "BasePath": chartName + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, top); err != nil {
			return err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		for _, doc := range strings.Split(text, "\n---") {
			doc = strings.TrimPrefix(doc, "---")
			if strings.TrimSpace(doc) == "" {
				continue
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, strings.Trim(doc, "\n"))
		}
	}
	fmt.Print(out.String())
	return nil
}
