// Building the page from values: every value becomes a text node or an
// attribute, never markup (the page's policy requires Trusted Types, so
// assigning a string as markup would throw).

// h makes an element: props are attributes (on* are listeners), children
// are elements or text.
export function h(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value == null || value === false) {
      continue;
    }
    if (name.startsWith('on')) {
      e.addEventListener(name.slice(2), value);
    } else if (value === true) {
      e.setAttribute(name, '');
    } else {
      e.setAttribute(name, String(value));
    }
  }
  for (const c of children.flat(Infinity)) {
    if (c != null && c !== false) {
      e.append(c instanceof Node ? c : String(c));
    }
  }
  return e;
}

// field is a labelled control: the label holds its text and the control.
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', {}, label), control, hint ? h('small', {}, hint) : null);
}

// select is a <select> of [value, text] options.
export function select(name, options, value) {
  return h('select', { name }, options.map(([v, text]) => h('option', { value: v, selected: v === value }, text)));
}

// when shows a time of the API in UTC, to the minute; none is a dash.
export function when(s) {
  return s ? s.replace('T', ' ').slice(0, 16) + ' UTC' : '—';
}

// until is the end of a ban: HH:MM UTC today, the day too otherwise.
export function until(s) {
  return s.slice(0, 10) === new Date().toISOString().slice(0, 10) ? s.slice(11, 16) + ' UTC' : when(s);
}

// num is a figure with the reader's thousands separators.
export function num(n) {
  return typeof n === 'number' ? n.toLocaleString() : n;
}

// table is a table of rows, or empty (a sentence saying what to do) when
// there are none. On a phone each row is a card, each cell labelled by its
// header; the columns of minor (their indexes) are left out there.
export function table(caption, headers, rows, empty, minor = []) {
  if (rows.length === 0) {
    return h('p', { class: 'empty' }, empty);
  }
  const cls = (i) => (minor.includes(i) ? 'minor' : null);
  return h('div', { class: 'scroll' },
    h('table', { class: 'cards' },
      h('caption', {}, caption),
      h('thead', {}, h('tr', {}, headers.map((x, i) => h('th', { scope: 'col', class: cls(i) }, x)))),
      h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((c, i) => h('td', { 'data-label': headers[i], class: cls(i) }, c)))))));
}

// confirm asks in a modal dialog; it answers true when confirmed.
export function confirm(question, action) {
  return new Promise((resolve) => {
    const d = h('dialog', { class: 'confirm', 'aria-label': action });
    const done = (ok) => {
      d.close();
      d.remove();
      resolve(ok);
    };
    d.append(h('p', {}, question),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'danger', onclick: () => done(true) }, action),
        h('button', { type: 'button', autofocus: true, onclick: () => done(false) }, 'Cancel')));
    d.addEventListener('cancel', (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(d);
    d.showModal();
  });
}

// secret shows a secret this once: a warning, the secret selected in a
// read-only box, and a copy button that falls back on the selection where
// the clipboard API is not offered (outside HTTPS and localhost).
export function secret(title, value, what) {
  const box = h('input', { type: 'text', readonly: true, value, class: 'secret-value', 'aria-label': title, spellcheck: 'false' });
  const said = h('p', { role: 'status', class: 'copied' });
  const copy = async () => {
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(value);
        said.textContent = 'Copied.';
        return;
      } catch (e) {
        // fall back on the selection below
      }
    }
    box.focus();
    box.select();
    said.textContent = 'Selected: press Ctrl+C (⌘C) to copy. The clipboard needs HTTPS or localhost.';
  };
  const panel = h('section', { class: 'secret', 'aria-label': title },
    h('h2', {}, title),
    h('p', { class: 'warning' }, `This is the only time ${what} is shown. Copy it now and keep it safe: it cannot be read again.`),
    h('div', { class: 'row' }, box, h('button', { type: 'button', class: 'copy', onclick: copy }, 'Copy')),
    said);
  queueMicrotask(() => {
    box.focus();
    box.select();
  });
  return panel;
}

// failed is an error said in place of what could not be shown.
export function failed(message) {
  return h('p', { class: 'error', role: 'alert' }, message);
}

// errorLine is a place for a form's error, read out when it changes.
export function errorLine() {
  return h('p', { class: 'error', role: 'alert' });
}
