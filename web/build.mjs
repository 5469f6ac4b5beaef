// Bundles the WebUI into src/pedl/webui/static: index.html (never cached) and assets/ whose names
// carry a content hash (cached for a year). Run from anywhere: `node web/build.mjs`.
import { build } from "esbuild";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "src", "pedl", "webui", "static");
const assets = join(out, "assets");

await rm(out, { recursive: true, force: true });
await mkdir(assets, { recursive: true });

const result = await build({
  absWorkingDir: here,
  entryPoints: { app: join(here, "src", "main.js") },
  bundle: true,
  minify: true,
  target: "es2020",
  format: "esm",
  outdir: assets,
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  legalComments: "none",
  logLevel: "warning",
  define: { "process.env.NODE_ENV": '"production"' },
});

const outputs = Object.keys(result.metafile.outputs).map((p) => join(here, p));
const pick = (ext) => {
  const found = outputs.filter((p) => p.endsWith(ext));
  if (found.length !== 1) throw new Error(`expected one ${ext} output, got ${found.length}: ${found.join(", ")}`);
  return "/assets/" + basename(found[0]);
};
const js = pick(".js");
const css = pick(".css");

const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pedl</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${css}">
<script type="module" src="${js}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The pedl WebUI needs JavaScript.</noscript>
</body>
</html>
`;
await writeFile(join(out, "index.html"), html);

let total = 0;
for (const [p, info] of Object.entries(result.metafile.outputs)) total += info.bytes;
console.log(`webui: ${relative(process.cwd(), out)}/index.html, ${js}, ${css} (${(total / 1024).toFixed(0)} KiB)`);
