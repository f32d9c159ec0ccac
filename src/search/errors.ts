/**
 * A search request that is well-formed JSON but cannot be answered as asked. The HTTP layer answers 422 with
 * `{detail: [{loc, msg, type}]}` built from these fields.
 */
export class SearchRequestError extends Error {
  constructor(
    readonly loc: (string | number)[],
    message: string,
    readonly type: string,
  ) {
    super(message);
    this.name = "SearchRequestError";
  }

  get detail(): { loc: (string | number)[]; msg: string; type: string }[] {
    return [{ loc: this.loc, msg: this.message, type: this.type }];
  }
}
