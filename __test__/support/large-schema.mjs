// The schema of scripts/large-fixture.mjs in the compiled form a host hands
// ensureSchema (what upstream's compileSchema makes of it), for the tests
// that open a generated file without an upstream tree.
import { serverSchema } from '../../scripts/large-fixture.mjs';
import { schema, table } from './schema.mjs';

export function largeSchema() {
  return schema(
    serverSchema.version,
    serverSchema.tables.map((t) =>
      table(t.name, t.columns, {
        primaryKey: t.primaryKey,
        scopes: t.scopes.map((p) => {
          const [, prefix, variable] = /^(\w+):\{(\w+)\}$/.exec(p);
          return { variable, prefix };
        }),
        indexes: t.indexes ?? [],
        materialize: t.materialize,
      }),
    ),
  );
}
