// Grades one conformance run by counting its checks, and writes baselines.
//
// Every scenario that ran counts (the suite's own verdict skips optional extensions such as
// tasks): each check in RESULTS_DIR/server-<scenario>-<timestamp>/checks.json is passed
// (SUCCESS), failed (FAILURE) or other (WARNING, INFO, SKIPPED: reported, never graded). A
// failed check is baselined when BASELINE_FILE has an entry for its scenario and check id.
//
//   node grade.mjs check  RUN_NAME RESULTS_DIR BASELINE_FILE
//     Prints the run's counts; exits 1 on a failed check no entry covers, or on an entry that
//     covers no failed check (stale: fixed, or no longer run; remove it). Entries whose reason
//     is still "unexplained" are warned about.
//   node grade.mjs update RUN_NAME RESULTS_DIR BASELINE_FILE
//     Rewrites BASELINE_FILE from this run's failed checks: an entry that stays keeps its
//     reason; a new one gets "unexplained", to be replaced by the cause.
//
// A baseline (YAML, in the subset written here: one entry per failed check id of a scenario):
//   checks:
//     - scenario: "tools-call-sampling"
//       check: "tools-call-sampling"
//       reason: "why it fails, and what would fix it"
import fs from 'node:fs';
import path from 'node:path';

const UNEXPLAINED = 'unexplained';
const [mode, runName, resultsDir, baselineFile] = process.argv.slice(2);
if (!['check', 'update'].includes(mode) || !baselineFile) {
  console.error('usage: node grade.mjs check|update RUN_NAME RESULTS_DIR BASELINE_FILE');
  process.exit(64);
}

const key = (scenario, check) => `${scenario}:${check}`;

// The checks of every scenario that ran: scenario -> checks of its newest result directory.
function results() {
  const newest = new Map();
  for (const dir of fs.readdirSync(resultsDir).sort()) {
    const match = dir.match(/^server-(.+)-(\d{4}-\d{2}-\d{2}T[\d-]+Z)$/);
    const file = path.join(resultsDir, dir, 'checks.json');
    if (match && fs.existsSync(file)) newest.set(match[1], file);
  }
  const byScenario = new Map();
  for (const [scenario, file] of newest) {
    let checks;
    try {
      checks = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (err) {
      checks = [{ id: 'checks-json-readable', status: 'FAILURE', errorMessage: `unreadable ${file}: ${err.message}` }];
    }
    byScenario.set(scenario, Array.isArray(checks) ? checks : []);
  }
  return byScenario;
}

// A scalar of the subset: a JSON-quoted string (what this script writes) or a bare word.
function scalar(text) {
  const value = text.trim();
  return value.startsWith('"') ? JSON.parse(value) : value;
}

// The baseline's entries, in file order.
function readBaseline() {
  if (!fs.existsSync(baselineFile)) return [];
  const entries = [];
  fs.readFileSync(baselineFile, 'utf8')
    .split('\n')
    .forEach((line, at) => {
      const field = line.match(/^\s*(-\s+)?(scenario|check|reason):\s*(.*)$/);
      if (!field) {
        if (line.trim() && !/^\s*#/.test(line) && !/^checks:\s*(\[\])?\s*$/.test(line)) {
          throw new Error(`${baselineFile}:${at + 1}: not a baseline line: ${line}`);
        }
        return;
      }
      if (field[1]) entries.push({});
      if (entries.length === 0) throw new Error(`${baselineFile}:${at + 1}: a field outside an entry`);
      entries.at(-1)[field[2]] = scalar(field[3]);
    });
  for (const entry of entries) {
    if (!entry.scenario || !entry.check || !entry.reason) {
      throw new Error(`${baselineFile}: an entry needs scenario, check and reason: ${JSON.stringify(entry)}`);
    }
  }
  return entries;
}

function counts(byScenario) {
  const failed = new Map(); // key -> {scenario, check, messages}
  let passed = 0;
  let other = 0;
  for (const [scenario, checks] of byScenario) {
    for (const check of checks) {
      if (check.status === 'SUCCESS') passed++;
      else if (check.status === 'FAILURE') {
        const k = key(scenario, check.id);
        const seen = failed.get(k) ?? { scenario, check: check.id, messages: [] };
        seen.messages.push(String(check.errorMessage ?? 'no message').replace(/\s+/g, ' ').slice(0, 240));
        failed.set(k, seen);
      } else other++;
    }
  }
  return { passed, other, failed };
}

const byScenario = results();
const { passed, other, failed } = counts(byScenario);
const failedChecks = [...failed.values()].reduce((n, f) => n + f.messages.length, 0);
const baseline = readBaseline();

if (mode === 'update') {
  const reasons = new Map(baseline.map((e) => [key(e.scenario, e.check), e.reason]));
  const lines = [
    `# Conformance failures expected of the ${runName} run (see conformance/README.md): one entry per`,
    '# failed check id of a scenario, with the cause. Written by scripts/conformance --update-baselines;',
    `# replace every reason "${UNEXPLAINED}" with the cause.`,
  ];
  const entries = [...failed.values()].sort((a, b) => key(a.scenario, a.check).localeCompare(key(b.scenario, b.check)));
  lines.push(entries.length === 0 ? 'checks: []' : 'checks:');
  for (const { scenario, check } of entries) {
    lines.push(`  - scenario: ${JSON.stringify(scenario)}`);
    lines.push(`    check: ${JSON.stringify(check)}`);
    lines.push(`    reason: ${JSON.stringify(reasons.get(key(scenario, check)) ?? UNEXPLAINED)}`);
  }
  fs.writeFileSync(baselineFile, lines.join('\n') + '\n');
  console.error(`conformance: ${runName}: wrote ${baselineFile} (${entries.length} entries)`);
  process.exit(0);
}

const listed = new Set(baseline.map((e) => key(e.scenario, e.check)));
const unlisted = [...failed.values()].filter((f) => !listed.has(key(f.scenario, f.check)));
const stale = baseline.filter((e) => !failed.has(key(e.scenario, e.check)));
const baselinedChecks = [...failed.values()]
  .filter((f) => listed.has(key(f.scenario, f.check)))
  .reduce((n, f) => n + f.messages.length, 0);

console.log(
  `conformance: ${runName}: ${byScenario.size} scenarios; checks passed ${passed}, failed ${failedChecks} ` +
    `(baselined ${baselinedChecks}, new ${failedChecks - baselinedChecks}), other ${other}`,
);
for (const f of unlisted) {
  console.log(`  FAILED, not in ${path.basename(baselineFile)}: ${key(f.scenario, f.check)}: ${f.messages[0]}`);
}
for (const e of stale) {
  const why = byScenario.has(e.scenario) ? 'no longer fails' : 'its scenario did not run';
  console.log(`  STALE baseline entry (${why}; remove it): ${key(e.scenario, e.check)}`);
}
for (const e of baseline.filter((e) => e.reason === UNEXPLAINED)) {
  console.log(`  warning: baseline entry without a reason: ${key(e.scenario, e.check)}`);
}
if (byScenario.size === 0) {
  console.log(`  no scenario left results in ${resultsDir}`);
  process.exit(1);
}
process.exit(unlisted.length > 0 || stale.length > 0 ? 1 : 0);
