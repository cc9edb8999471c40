// Builds the dashboard's page into cli/topogov_cli/dashboard/static/ (what the CLI package ships):
// one bundle of src/main.js with Apache ECharts (tree-shaken: the custom and bar charts only), the
// stylesheet and index.html. Run by `make install` through `npm run build:dashboard`; no network.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "topogov_cli", "dashboard", "static");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  outfile: join(out, "app.js"),
  legalComments: "eof", // ECharts' Apache-2.0 notices stay in the bundle
  logLevel: "warning",
});
copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));
copyFileSync(join(here, "src", "style.css"), join(out, "style.css"));
console.log(`dashboard built into ${out}`);
