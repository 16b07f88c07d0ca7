#!/usr/bin/env node
/**
 * Completes package-lock.json with entries for platform-specific optional dependencies that npm
 * could not record (a registry that serves only this machine's platform builds leaves them out, and
 * `npm ci` then refuses the lock as "Missing: <pkg>@ from lock file").
 *
 * For every optional dependency a locked package declares but the lock lacks, it adds an entry with
 * the declared version and the os/cpu/libc read from the package name (e.g. "-darwin-arm64"); no
 * integrity is invented. npm skips such entries on other platforms and, on a platform that needs
 * one, fetches that exact version from the registry. Run after changing dependencies:
 *   npm install && node scripts/lock-optional-platforms.mjs
 */
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const packages = lock.packages;

const OS = ['darwin', 'linux', 'win32', 'freebsd', 'android', 'openbsd', 'sunos', 'aix', 'netbsd', 'openharmony'];
const CPU = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 'riscv64', 's390x', 'loong64', 'mips64el', 'wasm32'];

function platformOf(name) {
  const base = name.split('/').pop();
  const parts = base.split('-');
  const os = parts.find((p) => OS.includes(p));
  let cpu = parts.find((p) => CPU.includes(p));
  if (!cpu && /(^|-)x86_64(-|$)/.test(base)) cpu = 'x64';
  const libc = /musl/.test(base) ? 'musl' : /gnu/.test(base) ? 'glibc' : undefined;
  return { os, cpu, libc };
}

/** Where npm would place a dependency of the package at `parentKey`: nested, else hoisted to the root. */
function candidates(parentKey, dep) {
  const out = [];
  let key = parentKey;
  while (key) {
    out.push(`${key}/node_modules/${dep}`);
    const idx = key.lastIndexOf('/node_modules/');
    key = idx > 0 ? key.slice(0, idx) : '';
  }
  out.push(`node_modules/${dep}`);
  return out;
}

let added = 0;
for (const [key, pkg] of Object.entries(packages)) {
  for (const [dep, version] of Object.entries(pkg.optionalDependencies ?? {})) {
    if (candidates(key, dep).some((k) => packages[k])) continue;
    const { os, cpu, libc } = platformOf(dep);
    if (!os && !cpu) continue; // not a platform build: leave it to npm
    const entry = { version: String(version).replace(/^[=^~]/, ''), optional: true };
    if (pkg.dev) entry.dev = true;
    if (cpu) entry.cpu = [cpu];
    if (libc) entry.libc = [libc];
    if (os) entry.os = [os];
    packages[`node_modules/${dep}`] = entry;
    added++;
  }
}
lock.packages = Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a.localeCompare(b))));
writeFileSync(path, JSON.stringify(lock, null, 2) + '\n');
console.log(`lock-optional-platforms: added ${added} entr${added === 1 ? 'y' : 'ies'}`);
