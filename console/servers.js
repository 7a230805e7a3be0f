// The servers that use the database as they last checked in, and where the
// schema stands: while a fleet is upgraded, which servers are done.
import { api } from './api.js';
import { h, when, table } from './dom.js';

export async function render(root) {
  const { schema, servers } = (await api('GET', '/servers')).data;
  const rows = servers.map((s) => [
    s.address,
    s.version + (s.revision && s.revision !== 'unknown' ? ' (' + s.revision.slice(0, 12) + ')' : ''),
    String(s.migrations),
    s.upToDate ? 'yes' : 'no: knows ' + s.migrations + ' of ' + schema.version,
    when(s.started),
    when(s.lastSeen),
  ]);
  root.append(h('h1', {}, 'Servers'),
    h('p', {}, `The schema has ${schema.version} migrations done; a server must know at least ${schema.level} to run on it. ` +
      'Each server checks in every 5 seconds; one not seen for 10 minutes leaves the list. ' +
      'While a fleet is upgraded, the servers not up to date are those left to replace.'),
    table('Servers', ['Address', 'Version', 'Migrations', 'Up to date', 'Started', 'Last seen'], rows,
      'No server has checked in yet: a server checks in within seconds of its start.', [4]));
}
