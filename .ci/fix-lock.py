#!/usr/bin/env python3
"""Adds lock entries for platform packages the registry mirror here does not serve.

npm records an optional platform package (e.g. @rollup/rollup-darwin-arm64) in the lock only
when it can fetch its manifest. The registry reachable from this workplace answers 404 for
packages of other platforms, so the lock npm writes lacks them and `npm ci` then refuses it as
"out of sync". Such entries are never installed on Linux x64 (os/cpu/libc exclude them), so
adding them with those fields is all `npm ci` needs. Run after any `npm install`.
"""
import json, re, sys

OS = {'android': 'android', 'darwin': 'darwin', 'freebsd': 'freebsd', 'linux': 'linux', 'openbsd': 'openbsd',
      'openharmony': 'openharmony', 'win32': 'win32', 'windows': 'win32', 'sunos': 'sunos', 'aix': 'aix', 'netbsd': 'netbsd'}
CPU = {'arm': 'arm', 'arm64': 'arm64', 'x64': 'x64', '64': 'x64', 'ia32': 'ia32', 'loong64': 'loong64', 'ppc64': 'ppc64',
       'riscv64': 'riscv64', 's390x': 's390x'}

def platform(name):
    parts = name.split('/')[-1].split('-')
    os_ = next((OS[p] for p in parts if p in OS), None)
    cpu = next((CPU[p] for p in parts if p in CPU), None)
    libc = 'musl' if 'musl' in parts or 'musleabihf' in parts else ('glibc' if os_ == 'linux' else None)
    return os_, cpu, libc

path = sys.argv[1] if len(sys.argv) > 1 else 'package-lock.json'
lock = json.load(open(path))
pkgs = lock['packages']
added = 0
for key, meta in list(pkgs.items()):
    for dep, ver in (meta.get('optionalDependencies') or {}).items():
        base = key + '/node_modules/' if key else 'node_modules/'
        if any(k == base + dep or k == 'node_modules/' + dep for k in pkgs):
            continue
        os_, cpu, libc = platform(dep)
        if not os_ or not cpu:
            continue
        entry = {'version': ver, 'cpu': [cpu], 'os': [os_], 'optional': True}
        if libc:
            entry['libc'] = [libc]
        pkgs['node_modules/' + dep] = entry
        added += 1
lock['packages'] = dict(sorted(pkgs.items(), key=lambda kv: (kv[0] != '', kv[0])))
json.dump(lock, open(path, 'w'), indent=2)
open(path, 'a').write('\n')
print(f'added {added} platform entries to {path}')
