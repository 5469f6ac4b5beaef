// JSON -> YAML for showing experiment configs (block style; strings quoted only when YAML needs it).

const PLAIN = /^[A-Za-z_/.][\w ./@+-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|~|y|n)$/i;

function scalar(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : v > 0 ? ".inf" : v < 0 ? "-.inf" : ".nan";
  const s = String(v);
  if (s === "" || RESERVED.test(s) || !PLAIN.test(s) || s.endsWith(" ") || /^[\d.+-]/.test(s) || s.includes(": ") || s.includes(" #")) {
    return JSON.stringify(s);
  }
  return s;
}

function key(k) {
  return PLAIN.test(k) && !RESERVED.test(k) && !k.includes(": ") ? k : JSON.stringify(k);
}

const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function lines(v, indent, out) {
  const pad = "  ".repeat(indent);
  if (Array.isArray(v)) {
    for (const item of v) {
      if (isObj(item) && Object.keys(item).length) {
        const sub = [];
        lines(item, indent + 1, sub);
        out.push(pad + "- " + sub[0].trimStart(), ...sub.slice(1));
      } else if (Array.isArray(item) && item.length) {
        out.push(pad + "-");
        lines(item, indent + 1, out);
      } else {
        out.push(pad + "- " + inline(item));
      }
    }
    return;
  }
  for (const [k, val] of Object.entries(v)) {
    if ((isObj(val) && Object.keys(val).length) || (Array.isArray(val) && val.length)) {
      out.push(pad + key(k) + ":");
      lines(val, indent + 1, out);
    } else {
      out.push(pad + key(k) + ": " + inline(val));
    }
  }
}

function inline(v) {
  if (Array.isArray(v)) return "[]";
  if (isObj(v)) return "{}";
  if (typeof v === "string" && v.includes("\n")) return JSON.stringify(v);
  return scalar(v);
}

export function toYaml(value) {
  if (!isObj(value) && !Array.isArray(value)) return scalar(value) + "\n";
  const out = [];
  lines(value, 0, out);
  return out.join("\n") + "\n";
}
