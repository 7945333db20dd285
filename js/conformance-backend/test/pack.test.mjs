// The package ships what it declares: `npm pack` makes a tarball that installs into an empty
// project without the network, and the installed package imports, types and serves.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

test('npm pack makes a tarball that installs offline and imports', { timeout: 120_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), 'runlane-pack-'));
  try {
    const listing = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8' }));
    const files = listing[0].files.map(({ path }) => path).sort();
    assert.deepEqual(files, ['README.md', 'index.d.ts', 'package.json', 'src/codec.mjs', 'src/errors.mjs', 'src/index.mjs', 'src/serve.mjs']);
    const [tarball] = readdirSync(work).filter((name) => name.endsWith('.tgz'));
    const project = join(work, 'project');
    execFileSync('mkdir', [project]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '0.0.0', type: 'module', private: true }));
    execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', join(work, tarball)], { cwd: project, stdio: 'pipe' });
    const probe = [
      "import { serve, encodeKey, StorageError } from '@runlane/conformance-backend';",
      "if (typeof serve !== 'function' || encodeKey('leases', ['env', 'k']) !== '6c6561736573/656e76/6b') process.exit(1);",
      "console.log(new StorageError('conflict', 'x').kind);",
    ].join('\n');
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', probe], { cwd: project, encoding: 'utf8' });
    assert.equal(out.trim(), 'conflict');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
