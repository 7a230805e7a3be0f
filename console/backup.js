// Where the continuous replica of the SQLite file stands (GET /admin/v1/backup).
import { api } from './api.js';
import { h, when } from './dom.js';

export async function render(root) {
  const b = (await api('GET', '/backup')).data;
  root.append(h('h1', {}, 'Backup'));
  if (!b.replicating) {
    root.append(h('p', { class: 'empty' },
      'This server replicates nothing: start it with --replicate-to s3://BUCKET/PATH (or file:///PATH) to stream the database off the machine (docs/production.md, "Backup and restore").'));
    return;
  }
  const behind = b.behind_seconds > 0 ? `${b.behind_seconds.toFixed(1)} s` : 'nothing: the replica holds every transaction';
  const rows = [
    ['Replica', b.url],
    ['Last upload', when(b.last_upload_at)],
    ['Behind by', behind],
    ['Uploaded', `${(b.uploaded_bytes / 1048576).toFixed(1)} MiB`],
    ['Failed calls', String(b.errors)],
    ['Last failure', b.last_error ? `${when(b.last_error_at)}: ${b.last_error}` : '—'],
  ];
  root.append(h('p', {}, 'The server streams the database\'s changes to its replica about every second; a disk lost loses at most that. A restore: petstore restore --from URL --db FILE [--at TIME].'),
    h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
}
