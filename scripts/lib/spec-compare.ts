// Compares two dereferenced OpenAPI 3.x documents and classifies every interface change for the server's clients.
// Requests and responses are judged in opposite directions: a client must still be able to send what it sent
// before (so request schemas may only loosen), and must still understand what it receives (so response schemas
// may only tighten).

export type Severity = "breaking" | "compatible" | "noted";

export interface Change {
  /** Where the change is, e.g. `POST /agents/search request body .limit`. */
  location: string;
  message: string;
  severity: Severity;
}

type Obj = Record<string, unknown>;
type Direction = "request" | "response";

interface SchemaContext {
  direction: Direction;
  /** The operation and body part, e.g. `POST /agents/search request body`. */
  where: string;
  /** The position inside that body, e.g. `.results[].role`; empty at the root. */
  path: string;
}

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;
const UPPER_BOUNDS = ["maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"] as const;
const LOWER_BOUNDS = ["minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"] as const;

function isObj(value: unknown): value is Obj {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function objAt(parent: Obj, key: string): Obj {
  const value = parent[key];
  return isObj(value) ? value : {};
}

function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

/** Path templates are matched by shape, so renaming `{id}` to `{model_id}` is not a removed operation. */
function pathShape(path: string): string {
  return path.replace(/\{[^}]*\}/g, "{}");
}

interface Operation {
  label: string;
  path: string;
  pathItem: Obj;
  op: Obj;
}

function operationsOf(doc: Obj): Map<string, Operation> {
  const found = new Map<string, Operation>();
  for (const [path, pathItem] of Object.entries(objAt(doc, "paths"))) {
    if (!isObj(pathItem)) continue;
    for (const method of METHODS) {
      const op = pathItem[method];
      if (isObj(op)) found.set(`${method.toUpperCase()} ${pathShape(path)}`, { label: `${method.toUpperCase()} ${path}`, path, pathItem, op });
    }
  }
  return found;
}

function isSuccessStatus(status: string): boolean {
  return /^2(\d\d|XX)$/i.test(status);
}

function typesOf(schema: Obj): Set<string> | undefined {
  const declared = schema.type;
  const types = typeof declared === "string" ? new Set([declared]) : Array.isArray(declared) ? new Set(declared.map(String)) : undefined;
  if (types && schema.nullable === true) types.add("null");
  return types;
}

/** An integer is also a number, so `number` covers `integer`. */
function covers(types: Set<string>, type: string): boolean {
  return types.has(type) || (type === "integer" && types.has("number"));
}

function showTypes(types: Set<string> | undefined): string {
  return types ? [...types].join("|") : "any";
}

function valuesOf(schema: Obj): unknown[] | undefined {
  if (Array.isArray(schema.enum)) return schema.enum;
  if ("const" in schema) return [schema.const];
  return undefined;
}

function unionOf(schema: Obj): { keyword: "oneOf" | "anyOf"; members: unknown[] } | undefined {
  if (Array.isArray(schema.oneOf)) return { keyword: "oneOf", members: schema.oneOf };
  if (Array.isArray(schema.anyOf)) return { keyword: "anyOf", members: schema.anyOf };
  return undefined;
}

function asSchema(value: unknown): Obj {
  if (value === false) return { enum: [] };
  return isObj(value) ? value : {};
}

/** Merges `allOf` members into one schema, so moving a property between members is not reported as a change. */
function flattenAllOf(schema: Obj): Obj {
  if (!Array.isArray(schema.allOf)) return schema;
  const { allOf, ...rest } = schema;
  let merged: Obj = rest;
  for (const member of allOf as unknown[]) merged = mergeSchemas(merged, flattenAllOf(asSchema(member)));
  return merged;
}

function mergeSchemas(a: Obj, b: Obj): Obj {
  const merged: Obj = { ...a };
  for (const [key, value] of Object.entries(b)) {
    if (!(key in merged)) {
      merged[key] = value;
    } else if (key === "properties" && isObj(value)) {
      const properties: Obj = { ...objAt(merged, "properties") };
      for (const [name, property] of Object.entries(value)) {
        properties[name] = name in properties ? { allOf: [properties[name], property] } : property;
      }
      merged.properties = properties;
    } else if (key === "required" && Array.isArray(value) && Array.isArray(merged.required)) {
      merged.required = [...new Set([...merged.required, ...value])];
    } else if (key === "type") {
      const left = typesOf({ type: merged.type });
      const right = typesOf({ type: value });
      if (left && right) merged.type = [...left].filter((t) => covers(right, t));
    } else if (key === "additionalProperties" && value === false) {
      merged.additionalProperties = false;
    }
  }
  return merged;
}

function withoutAnnotations(schema: Obj): Obj {
  const { description: _d, default: _df, example: _e, examples: _es, deprecated: _dp, ...core } = schema;
  return core;
}

/** A coarse fingerprint used to pair the alternatives of two unions whose member counts differ. */
function memberSignature(schema: Obj): string {
  const flat = flattenAllOf(schema);
  const types = typesOf(flat);
  return `${types ? [...types].sort().join("|") : "any"}:${show(valuesOf(flat) ?? null)}`;
}

class SpecComparer {
  readonly changes: Change[] = [];
  private readonly stack: Array<[unknown, unknown]> = [];

  constructor(
    private readonly baseDoc: Obj,
    private readonly headDoc: Obj,
  ) {}

  private add(location: string, severity: Severity, message: string): void {
    this.changes.push({ location, severity, message });
  }

  run(): void {
    const baseOps = operationsOf(this.baseDoc);
    const headOps = operationsOf(this.headDoc);
    for (const [key, base] of baseOps) {
      const head = headOps.get(key);
      if (head) this.compareOperation(base, head);
      else this.add(base.label, "breaking", "operation removed");
    }
    for (const [key, head] of headOps) {
      if (!baseOps.has(key)) this.add(head.label, "compatible", "operation added");
    }
  }

  private compareOperation(base: Operation, head: Operation): void {
    const where = head.label;
    if (base.path !== head.path) this.add(where, "compatible", `path parameter names changed (was ${base.path})`);
    const [baseId, headId] = [base.op.operationId, head.op.operationId];
    if (baseId !== headId) {
      if (baseId === undefined) this.add(where, "compatible", `operationId ${show(headId)} added`);
      else this.add(where, "breaking", headId === undefined ? `operationId ${show(baseId)} removed` : `operationId changed ${show(baseId)} -> ${show(headId)}`);
    }
    if (base.op.deprecated !== true && head.op.deprecated === true) this.add(where, "noted", "operation deprecated");
    for (const key of ["summary", "description"]) {
      if (base.op[key] !== head.op[key]) this.add(where, "compatible", `${key} changed`);
    }
    this.compareSecurity(where, base.op, head.op);
    this.compareParameters(where, base, head);
    this.compareRequestBody(where, base.op.requestBody, head.op.requestBody);
    this.compareResponses(where, objAt(base.op, "responses"), objAt(head.op, "responses"));
  }

  private compareSecurity(where: string, baseOp: Obj, headOp: Obj): void {
    const base = requirementsOf(baseOp.security ?? this.baseDoc.security);
    const head = requirementsOf(headOp.security ?? this.headDoc.security);
    // Alternatives are ORed: a client that satisfied one base alternative is fine if some head alternative asks for no more.
    const stillSatisfied = (alt: Map<string, Set<string>>) =>
      head.some((h) => [...h].every(([scheme, scopes]) => alt.has(scheme) && [...scopes].every((s) => alt.get(scheme)?.has(s))));
    const lost = base.filter((alt) => !stillSatisfied(alt));
    if (lost.length > 0) {
      this.add(where, "breaking", `security requirement added: ${showRequirements(head)} (was ${showRequirements(base)})`);
    } else if (showRequirements(base) !== showRequirements(head)) {
      this.add(where, "compatible", `security relaxed: ${showRequirements(head)} (was ${showRequirements(base)})`);
    }
    const baseSchemes = objAt(objAt(this.baseDoc, "components"), "securitySchemes");
    const headSchemes = objAt(objAt(this.headDoc, "components"), "securitySchemes");
    const used = new Set(head.flatMap((alt) => [...alt.keys()]));
    for (const name of used) {
      const [b, h] = [objAt(baseSchemes, name), objAt(headSchemes, name)];
      const changed = ["type", "scheme", "in", "name"].filter((k) => b[k] !== undefined && b[k] !== h[k]);
      if (changed.length > 0 && base.some((alt) => alt.has(name))) {
        this.add(where, "breaking", `security scheme ${name} changed (${changed.map((k) => `${k} ${show(b[k])} -> ${show(h[k])}`).join(", ")})`);
      }
    }
  }

  private compareParameters(where: string, base: Operation, head: Operation): void {
    const baseParams = parametersOf(base);
    const headParams = parametersOf(head);
    for (const [key, b] of baseParams) {
      const h = headParams.get(key);
      const label = `${where} ${b.in} parameter ${b.name}`;
      if (!h) {
        this.add(label, "noted", "parameter removed (clients that send it are no longer understood)");
        continue;
      }
      const hLabel = `${where} ${h.in} parameter ${h.name}`;
      if (b.in === "path" && b.name !== h.name) this.add(hLabel, "compatible", `path parameter renamed ${b.name} -> ${h.name}`);
      if (b.required !== true && h.required === true) this.add(hLabel, "breaking", "parameter became required");
      if (b.required === true && h.required !== true) this.add(hLabel, "compatible", "parameter is now optional");
      if (b.deprecated !== true && h.deprecated === true) this.add(hLabel, "noted", "parameter deprecated");
      for (const key of ["style", "explode"]) {
        if (b[key] !== h[key]) this.add(hLabel, "breaking", `${key} changed ${show(b[key])} -> ${show(h[key])}`);
      }
      if (b.description !== h.description) this.add(hLabel, "compatible", "description changed");
      this.compareSchema(parameterSchema(b), parameterSchema(h), "request", hLabel);
    }
    for (const [key, h] of headParams) {
      if (baseParams.has(key)) continue;
      const label = `${where} ${h.in} parameter ${h.name}`;
      if (h.required === true) this.add(label, "breaking", "new required parameter");
      else this.add(label, "compatible", "new optional parameter");
    }
  }

  private compareRequestBody(where: string, baseBody: unknown, headBody: unknown): void {
    const label = `${where} request body`;
    if (!isObj(baseBody) && !isObj(headBody)) return;
    if (!isObj(baseBody) && isObj(headBody)) {
      this.add(label, headBody.required === true ? "breaking" : "compatible", headBody.required === true ? "required request body added" : "optional request body added");
      return;
    }
    if (isObj(baseBody) && !isObj(headBody)) {
      this.add(label, "breaking", "request body removed");
      return;
    }
    const [b, h] = [baseBody as Obj, headBody as Obj];
    if (b.required !== true && h.required === true) this.add(label, "breaking", "request body became required");
    if (b.required === true && h.required !== true) this.add(label, "compatible", "request body is now optional");
    this.compareContent(label, objAt(b, "content"), objAt(h, "content"), "request", true);
  }

  private compareResponses(where: string, base: Obj, head: Obj): void {
    for (const [status, b] of Object.entries(base)) {
      const label = `${where} response ${status}`;
      const success = isSuccessStatus(status);
      if (!(status in head)) {
        this.add(label, success ? "breaking" : "compatible", success ? "success response removed" : "response no longer documented");
        continue;
      }
      const h = asSchema(head[status]);
      if (asSchema(b).description !== h.description) this.add(label, "compatible", "description changed");
      this.compareContent(label, objAt(asSchema(b), "content"), objAt(h, "content"), "response", success);
    }
    for (const status of Object.keys(head)) {
      if (status in base) continue;
      const success = isSuccessStatus(status);
      this.add(`${where} response ${status}`, success ? "noted" : "compatible", success ? "new success status" : "new response status");
    }
  }

  private compareContent(label: string, base: Obj, head: Obj, direction: Direction, removalBreaks: boolean): void {
    const describe = (mediaType: string) => (mediaType.toLowerCase() === "application/json" ? label : `${label} (${mediaType})`);
    const headTypes = new Map(Object.keys(head).map((t) => [t.toLowerCase(), t]));
    const baseTypes = new Set(Object.keys(base).map((t) => t.toLowerCase()));
    for (const [mediaType, b] of Object.entries(base)) {
      const headType = headTypes.get(mediaType.toLowerCase());
      if (headType === undefined) {
        const message = direction === "request" ? "media type no longer accepted" : "media type no longer returned";
        this.add(describe(mediaType), removalBreaks ? "breaking" : "noted", message);
        continue;
      }
      const [bm, hm] = [asSchema(b), asSchema(head[headType])];
      if (show(bm.example) !== show(hm.example) || show(bm.examples) !== show(hm.examples)) {
        this.add(describe(mediaType), "compatible", "examples changed");
      }
      this.compareSchema(bm.schema, hm.schema, direction, describe(mediaType));
    }
    for (const [lower, mediaType] of headTypes) {
      if (!baseTypes.has(lower)) this.add(describe(mediaType), "compatible", direction === "request" ? "media type now accepted" : "new media type");
    }
  }

  private compareSchema(baseValue: unknown, headValue: unknown, direction: Direction, where: string, path = ""): void {
    // Dereferenced documents share objects and may be cyclic: stop when this pair is already being compared above.
    if (this.stack.some(([b, h]) => b === baseValue && h === headValue)) return;
    this.stack.push([baseValue, headValue]);
    try {
      this.compareSchemaBody(flattenAllOf(asSchema(baseValue)), flattenAllOf(asSchema(headValue)), { direction, where, path });
    } finally {
      this.stack.pop();
    }
  }

  private at(ctx: SchemaContext, path = ctx.path): string {
    return path ? `${ctx.where} ${path}` : ctx.where;
  }

  private compareSchemaBody(b: Obj, h: Obj, ctx: SchemaContext): void {
    const location = this.at(ctx);
    if (b.description !== h.description && b.description !== undefined && h.description !== undefined) {
      this.add(location, "compatible", "description changed");
    }
    if (show(b.examples) !== show(h.examples) || show(b.example) !== show(h.example)) this.add(location, "compatible", "examples changed");
    if (ctx.direction === "request" && show(b.default) !== show(h.default)) {
      this.add(location, "noted", `default changed ${show(b.default)} -> ${show(h.default)}`);
    }
    if (b.deprecated !== true && h.deprecated === true) this.add(location, "noted", "deprecated");

    if (unionOf(b) || unionOf(h)) {
      this.compareUnions(b, h, ctx);
      return;
    }
    this.compareTypes(b, h, ctx);
    this.compareValues(b, h, ctx);
    this.compareBounds(b, h, ctx);
    this.compareStringRules(b, h, ctx);
    this.compareObjects(b, h, ctx);
    if (b.items !== undefined || h.items !== undefined) this.compareSchema(b.items, h.items, ctx.direction, ctx.where, `${ctx.path}[]`);
  }

  private compareTypes(b: Obj, h: Obj, ctx: SchemaContext): void {
    const [bt, ht] = [typesOf(b), typesOf(h)];
    if (!bt && !ht) return;
    const lost = bt ? (ht ? [...bt].filter((t) => !covers(ht, t)) : []) : ["any"];
    const gained = ht ? (bt ? [...ht].filter((t) => !covers(bt, t)) : []) : ["any"];
    if (lost.length === 0 && gained.length === 0) return;
    const verb = lost.length > 0 && gained.length > 0 ? "changed" : lost.length > 0 ? "narrowed" : "widened";
    // A request may accept more types; a response may return fewer.
    const breaking = ctx.direction === "request" ? lost.length > 0 : gained.length > 0;
    this.add(this.at(ctx), breaking ? "breaking" : "compatible", `type ${verb} ${showTypes(bt)} -> ${showTypes(ht)}`);
  }

  private compareValues(b: Obj, h: Obj, ctx: SchemaContext): void {
    const location = this.at(ctx);
    const [bv, hv] = [valuesOf(b), valuesOf(h)];
    if (!bv && !hv) return;
    if (!bv || !hv) {
      if (ctx.direction === "request") {
        if (hv) this.add(location, "breaking", `values restricted to ${hv.map(show).join(", ")}`);
        else this.add(location, "compatible", "value restriction removed");
      } else if (bv) {
        this.add(location, "noted", "value restriction removed (any value may be returned)");
      } else {
        this.add(location, "compatible", `values restricted to ${(hv ?? []).map(show).join(", ")}`);
      }
      return;
    }
    const baseKeys = new Set(bv.map(show));
    const headKeys = new Set(hv.map(show));
    const removed = [...baseKeys].filter((v) => !headKeys.has(v));
    const added = [...headKeys].filter((v) => !baseKeys.has(v));
    if (ctx.direction === "response" && removed.length === baseKeys.size && added.length > 0) {
      this.add(location, "breaking", `value changed ${[...baseKeys].join(", ")} -> ${[...headKeys].join(", ")}`);
      return;
    }
    if (removed.length > 0) {
      this.add(location, ctx.direction === "request" ? "breaking" : "compatible", `enum value${removed.length > 1 ? "s" : ""} removed: ${removed.join(", ")}`);
    }
    if (added.length > 0) {
      this.add(location, ctx.direction === "request" ? "compatible" : "noted", `enum value${added.length > 1 ? "s" : ""} added: ${added.join(", ")}`);
    }
  }

  private compareBounds(b: Obj, h: Obj, ctx: SchemaContext): void {
    const location = this.at(ctx);
    const request = ctx.direction === "request";
    const check = (key: string, tightened: (before: number, after: number) => boolean) => {
      const bv = typeof b[key] === "number" ? (b[key] as number) : undefined;
      const hv = typeof h[key] === "number" ? (h[key] as number) : undefined;
      if (bv === hv) return;
      const tighter = hv !== undefined && (bv === undefined || tightened(bv, hv));
      const message =
        bv === undefined ? `${key} ${hv} added` : hv === undefined ? `${key} ${bv} removed` : `${key} ${hv < bv ? "lowered" : "raised"} ${bv} -> ${hv}`;
      if (request) this.add(location, tighter ? "breaking" : "compatible", message);
      else this.add(location, tighter ? "compatible" : "noted", message);
    };
    for (const key of UPPER_BOUNDS) check(key, (before, after) => after < before);
    for (const key of LOWER_BOUNDS) check(key, (before, after) => after > before);
    if (b.multipleOf !== h.multipleOf) {
      const message = `multipleOf ${show(b.multipleOf)} -> ${show(h.multipleOf)}`;
      if (request) this.add(location, h.multipleOf === undefined ? "compatible" : "breaking", message);
      else this.add(location, b.multipleOf === undefined ? "compatible" : "noted", message);
    }
    if ((b.uniqueItems === true) !== (h.uniqueItems === true)) {
      const unique = h.uniqueItems === true;
      const message = unique ? "items must now be unique" : "items no longer need to be unique";
      if (request) this.add(location, unique ? "breaking" : "compatible", message);
      else this.add(location, unique ? "compatible" : "noted", message);
    }
  }

  private compareStringRules(b: Obj, h: Obj, ctx: SchemaContext): void {
    const location = this.at(ctx);
    for (const key of ["pattern", "format"] as const) {
      const [bv, hv] = [b[key], h[key]];
      if (bv === hv) continue;
      const message = bv === undefined ? `${key} ${show(hv)} added` : hv === undefined ? `${key} ${show(bv)} removed` : `${key} changed ${show(bv)} -> ${show(hv)}`;
      if (ctx.direction === "request") {
        this.add(location, hv === undefined ? "compatible" : "breaking", message);
      } else if (bv === undefined) {
        this.add(location, "compatible", message);
      } else {
        // A client may rely on a returned format (e.g. parse a date-time); a pattern is informative.
        this.add(location, key === "format" ? "breaking" : "noted", message);
      }
    }
  }

  private compareObjects(b: Obj, h: Obj, ctx: SchemaContext): void {
    const request = ctx.direction === "request";
    const hidden = request ? "readOnly" : "writeOnly";
    const visible = (properties: Obj) => new Map(Object.entries(properties).filter(([, s]) => !(isObj(s) && s[hidden] === true)));
    const [bp, hp] = [visible(objAt(b, "properties")), visible(objAt(h, "properties"))];
    const required = (s: Obj) => new Set(Array.isArray(s.required) ? s.required.map(String) : []);
    const [br, hr] = [required(b), required(h)];
    const headClosed = h.additionalProperties === false || h.unevaluatedProperties === false;
    for (const name of new Set([...bp.keys(), ...br, ...hp.keys(), ...hr])) {
      const path = `${ctx.path}.${name}`;
      const location = this.at(ctx, path);
      const inBase = bp.has(name) || br.has(name);
      const inHead = hp.has(name) || hr.has(name);
      if (inBase && !inHead) {
        if (!request) this.add(location, "breaking", "property removed");
        else if (headClosed) this.add(location, "breaking", "property removed (additional properties are not allowed)");
        else this.add(location, "noted", "property removed (it is no longer documented)");
        continue;
      }
      if (!inBase && inHead) {
        if (request && hr.has(name)) this.add(location, "breaking", "new required property");
        else this.add(location, "compatible", request ? "new optional property" : "new property");
        continue;
      }
      if (request) {
        if (!br.has(name) && hr.has(name)) this.add(location, "breaking", "property became required");
        if (br.has(name) && !hr.has(name)) this.add(location, "compatible", "property is now optional");
      } else {
        if (br.has(name) && !hr.has(name)) this.add(location, "breaking", "property made optional (no longer in required)");
        if (!br.has(name) && hr.has(name)) this.add(location, "compatible", "property is now always present");
      }
      if (bp.has(name) || hp.has(name)) this.compareSchema(bp.get(name), hp.get(name), ctx.direction, ctx.where, path);
    }
    const location = this.at(ctx);
    const [ba, ha] = [b.additionalProperties, h.additionalProperties];
    if (request && ba !== false && ha === false) this.add(location, "breaking", "additional properties no longer allowed");
    if (request && ba === false && ha !== undefined && ha !== false) this.add(location, "compatible", "additional properties now allowed");
    if (!request && ba === false && ha !== false) this.add(location, "noted", "additional properties may now be returned");
    if ((isObj(ba) || isObj(ha)) && ba !== false && ha !== false) this.compareSchema(ba, ha, ctx.direction, ctx.where, `${ctx.path}{*}`);
  }

  private compareUnions(b: Obj, h: Obj, ctx: SchemaContext): void {
    const request = ctx.direction === "request";
    const baseUnion = unionOf(b);
    const headUnion = unionOf(h);
    // A plain schema on one side is treated as a union of itself, so `string` -> `oneOf [string, null]` reads as an
    // added alternative. Its annotations were compared above, so only its core takes part in the pairing.
    const baseMembers = baseUnion ? baseUnion.members : [withoutAnnotations(b)];
    const headMembers = headUnion ? headUnion.members : [withoutAnnotations(h)];
    const keyword = headUnion?.keyword ?? baseUnion?.keyword ?? "oneOf";
    const memberPath = (index: number) => (headUnion ? `${ctx.path}.${keyword}[${index}]` : ctx.path);
    if (baseUnion && headUnion && baseUnion.keyword !== headUnion.keyword) {
      const loosened = headUnion.keyword === "anyOf";
      const severity: Severity = request ? (loosened ? "compatible" : "breaking") : loosened ? "noted" : "compatible";
      this.add(this.at(ctx), severity, `${baseUnion.keyword} changed to ${headUnion.keyword}`);
    }
    const pairs: Array<[number, number]> = [];
    const usedHead = new Set<number>();
    if (baseUnion && headUnion && baseMembers.length === headMembers.length) {
      baseMembers.forEach((_, i) => {
        pairs.push([i, i]);
        usedHead.add(i);
      });
    } else {
      baseMembers.forEach((member, i) => {
        const signature = memberSignature(asSchema(member));
        const j = headMembers.findIndex((m, k) => !usedHead.has(k) && memberSignature(asSchema(m)) === signature);
        if (j >= 0) {
          pairs.push([i, j]);
          usedHead.add(j);
        } else {
          const path = baseUnion ? `${ctx.path}.${baseUnion.keyword}[${i}]` : ctx.path;
          const types = showTypes(typesOf(flattenAllOf(asSchema(member))));
          this.add(this.at(ctx, path), request ? "breaking" : "compatible", `alternative removed (${types})`);
        }
      });
    }
    for (const [i, j] of pairs) this.compareSchema(baseMembers[i], headMembers[j], ctx.direction, ctx.where, memberPath(j));
    headMembers.forEach((member, j) => {
      if (usedHead.has(j)) return;
      const types = showTypes(typesOf(flattenAllOf(asSchema(member))));
      const message = request ? `alternative added (${types})` : `new alternative may be returned (${types})`;
      this.add(this.at(ctx, memberPath(j)), request ? "compatible" : "breaking", message);
    });
  }
}

interface Parameter extends Obj {
  name: string;
  in: string;
}

/** Path-level parameters apply unless the operation redefines them; path parameters are matched by position. */
function parametersOf(operation: Operation): Map<string, Parameter> {
  const found = new Map<string, Parameter>();
  const templates = [...operation.path.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]);
  for (const list of [operation.pathItem.parameters, operation.op.parameters]) {
    if (!Array.isArray(list)) continue;
    for (const p of list) {
      if (!isObj(p) || typeof p.name !== "string" || typeof p.in !== "string") continue;
      const param = p as Parameter;
      const key = param.in === "path" ? `path:${templates.indexOf(param.name)}` : `${param.in}:${param.in === "header" ? param.name.toLowerCase() : param.name}`;
      found.set(key, param);
    }
  }
  return found;
}

function parameterSchema(param: Parameter): unknown {
  if (param.schema !== undefined) return param.schema;
  const first = Object.values(objAt(param, "content"))[0];
  return isObj(first) ? first.schema : undefined;
}

function requirementsOf(security: unknown): Array<Map<string, Set<string>>> {
  const list = Array.isArray(security) ? security.filter(isObj) : [];
  // No requirement at all is the same as one empty alternative: anonymous access.
  if (list.length === 0) return [new Map()];
  return list.map((alt) => new Map(Object.entries(alt).map(([scheme, scopes]) => [scheme, new Set(Array.isArray(scopes) ? scopes.map(String) : [])])));
}

function showRequirements(requirements: Array<Map<string, Set<string>>>): string {
  return requirements
    .map((alt) => (alt.size === 0 ? "none" : [...alt].map(([scheme, scopes]) => (scopes.size ? `${scheme}[${[...scopes].join(",")}]` : scheme)).join("+")))
    .join(" or ");
}

/** Lists every change between two dereferenced OpenAPI documents, in document order. */
export function compareSpecs(base: object, head: object): Change[] {
  const comparer = new SpecComparer(base as Obj, head as Obj);
  comparer.run();
  return comparer.changes;
}

function severityLabel(severity: Severity): string {
  return severity === "breaking" ? "BREAKING" : severity === "noted" ? "compatible, noted" : "compatible";
}

export function formatChange(change: Change): string {
  return `${change.location}: ${change.message} (${severityLabel(change.severity)})`;
}
