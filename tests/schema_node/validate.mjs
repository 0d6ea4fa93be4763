// Compile the served schema with ajv in strict mode, then validate values against its definitions.
//
//   node validate.mjs SCHEMA.json < ITEMS.jsonl
//
// Each input line is {"def": "ServerFrame", "value": ...}; each output line is {"valid": true} or
// {"valid": false, "errors": [...]}, in input order. The schema is added under its file name, and each
// value is checked with ajv.getSchema(name + "#/$defs/" + def), the way docs/protocol.md tells client
// authors to. Exit status 2 when the schema (or any of its definitions) does not compile.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import Ajv2020 from "ajv/dist/2020.js";

const path = process.argv[2];
const schema = JSON.parse(readFileSync(path, "utf8"));
const key = basename(path);
const ajv = new Ajv2020({ strict: true, allErrors: true });
const validators = new Map();
try {
  ajv.addSchema(schema, key);
  ajv.getSchema(key); // the root, and through it every definition it references
  for (const name of Object.keys(schema.$defs)) validators.set(name, ajv.getSchema(`${key}#/$defs/${name}`));
} catch (error) {
  process.stderr.write(`the schema does not compile: ${error.message}\n`);
  process.exit(2);
}
const lines = readFileSync(0, "utf8").split("\n").filter((line) => line.trim());
const out = [];
for (const line of lines) {
  const { def, value } = JSON.parse(line);
  const validate = validators.get(def);
  if (!validate) throw new Error(`no definition ${def}`);
  out.push(JSON.stringify(validate(value) ? { valid: true } : { valid: false, errors: validate.errors }));
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
