package samlsp

// MarshalYAML writes the configuration with the key redacted, for
// gopkg.in/yaml.v3.
func (c Config) MarshalYAML() (any, error) { return c.redacted(), nil }
