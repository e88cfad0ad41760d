-- A profile merge: count visits, keep the earliest first-seen time, take the newest name,
-- and let an incoming {"forget": true} delete the profile.
return function(current, incoming, context)
  if incoming.forget then
    return merge.DELETE
  end
  if incoming.visits == nil then
    return merge.UNCHANGED
  end
  if current == nil then
    current = {visits = 0, first_seen = json.datetime(context.time)}
  end
  current.visits = current.visits + incoming.visits
  if incoming.name ~= nil then
    current.name = incoming.name
  end
  current.last_attempt = context.attempt
  return current
end
