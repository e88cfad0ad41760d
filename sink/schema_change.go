package sink

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tributary-dev/tributary/cdc"
)

// extendMappings gives each index, before documents of a table schema it has not met in this
// session are written, a generated field for every column of that schema the index's mapping
// lacks. Without it a column added at the source after the index was created would be mapped
// dynamically by the first document carrying it (a DECIMAL as float, a DATETIME as text),
// which cannot be undone. Fields are added only with auto_create_index (without it the sink
// owns no mapping), but the mapping is read either way: it decides each column's guard (what
// a value must satisfy for the field the index really has, see guardsFor).
func (s *Sink) extendMappings(ctx context.Context, acts []action) error {
	for i := range acts {
		a := &acts[i]
		// A delete carries no fields; the table's next index action does the check.
		if a.del || a.info == nil || a.info.mapped {
			continue
		}
		if err := s.extendMapping(ctx, a.index, a.schema, a.info); err != nil {
			return err
		}
		a.info.mapped = true
	}
	return nil
}

// extendMapping adds the schema's missing columns to the index's mapping (with
// auto_create_index) and derives ti.guards from the fields the index then has. Existing
// fields are left alone even when the column's type changed: a field's type cannot change in
// place; the guards keep values the old field would round or refuse from reaching it, and the
// rows the cluster still rejects are dead-lettered by the per-item rejection.
func (s *Sink) extendMapping(ctx context.Context, index string, sch *cdc.TableSchema, ti *tableInfo) error {
	claim := s.claims[index]
	have, ok := s.fields[index]
	if !ok {
		f, err := s.fence.Fields(ctx, claim)
		if err != nil {
			return s.requestError(err, "reading the index's mapping")
		}
		have = f
		s.fields[index] = have
	}
	o := s.configuredMapping()
	var add map[string]json.RawMessage
	for i := range sch.Columns {
		c := &sch.Columns[i]
		if _, ok := have[c.Name]; ok || !s.cfg.AutoCreate() {
			continue
		}
		if add == nil {
			var err error
			if o, err = s.mappingOptions(ctx); err != nil {
				return err
			}
			add = map[string]json.RawMessage{}
		}
		m, err := FieldMapping(c, o)
		if err != nil {
			return cdc.Permanent(fmt.Errorf("elasticsearch sink %q: mapping for table %s: %w", s.cfg.ID, sch.ID, err))
		}
		add[c.Name] = m
	}
	if len(add) > 0 {
		if err := s.fence.AddFields(ctx, claim, add); err != nil {
			return s.requestError(err, "adding new columns to the index's mapping")
		}
		for name, m := range add {
			have[name] = m
		}
	}
	// Without auto_create_index a column the index lacks is mapped by the cluster (dynamic
	// mapping or a template's dynamic_templates) when its first document arrives; until a
	// later session reads that field, its values are checked against the generated field.
	ti.guards = guardsFor(sch, have, o)
	return nil
}

// FieldMapping is the mapping GenerateMapping gives one column, for adding a column to an
// existing index.
func FieldMapping(c *cdc.Column, o MappingOptions) (json.RawMessage, error) {
	if reason := checkFieldName(c.Name); reason != "" {
		return nil, fmt.Errorf("sink: mapping: column %q: %s", c.Name, reason)
	}
	b, err := appendFieldMapping(nil, c, o, 0)
	if err != nil {
		return nil, fmt.Errorf("sink: mapping: column %q: %w", c.Name, err)
	}
	return b, nil
}
