import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { ErrorText, useAction } from '../components/ui.js';
import { api } from '../lib/api.js';

type Json = Record<string, unknown>;

/**
 * A form of one `/api/admin/settings` key (mail, sms, retention): the fields, Save, and an
 * optional test message; what the form holds is turned into the key's `jsonValue` by `toJson`.
 */
export function SettingsForm(props: {
  title: string;
  settingsKey: string;
  toJson: (f: FormData) => Json;
  test?: (json: Json, f: FormData) => Promise<unknown>;
  testLabel?: string;
  onSaved?: () => void;
  children: ComponentChildren;
}) {
  const act = useAction();
  const [done, setDone] = useState('');
  const run = (e: Event, what: 'save' | 'test') => {
    const form = (e.currentTarget as HTMLElement).closest('form') as HTMLFormElement;
    if (!form.reportValidity()) return;
    const f = new FormData(form);
    const jsonValue = props.toJson(f);
    const test = props.test;
    setDone('');
    void act
      .run(() =>
        what === 'save' || !test
          ? api('/api/admin/settings', { body: { key: props.settingsKey, jsonValue } })
          : test(jsonValue, f),
      )
      .then((ok) => {
        if (!ok) return;
        setDone(what === 'save' ? 'Saved' : 'Test message sent');
        if (what === 'save') props.onSaved?.();
      });
  };
  return (
    <form
      class="stack card"
      aria-label={props.title}
      onSubmit={(e) => {
        e.preventDefault();
        run(e, 'save');
      }}
    >
      {props.children}
      <ErrorText error={act.error} />
      <div class="buttons">
        {props.test && (
          <button type="button" onClick={(e) => run(e, 'test')} disabled={act.busy}>
            {props.testLabel}
          </button>
        )}
        <button type="submit" class="primary" disabled={act.busy}>
          Save
        </button>
      </div>
      <output aria-live="polite">{done}</output>
    </form>
  );
}
